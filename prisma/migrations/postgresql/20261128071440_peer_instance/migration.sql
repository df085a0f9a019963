-- CreateTable
CREATE TABLE "PeerInstance" (
    "instanceId" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "seenAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "PeerInstance_pkey" PRIMARY KEY ("instanceId")
);

-- CreateIndex
CREATE INDEX "PeerInstance_seenAt_idx" ON "PeerInstance"("seenAt");
