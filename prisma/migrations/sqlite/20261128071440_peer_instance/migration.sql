-- CreateTable
CREATE TABLE "PeerInstance" (
    "instanceId" TEXT NOT NULL PRIMARY KEY,
    "url" TEXT NOT NULL,
    "seenAt" DATETIME NOT NULL
);

-- CreateIndex
CREATE INDEX "PeerInstance_seenAt_idx" ON "PeerInstance"("seenAt");
