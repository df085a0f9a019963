-- CreateTable
CREATE TABLE "AgentLease" (
    "sessionId" TEXT NOT NULL,
    "instanceId" TEXT NOT NULL,
    "seenAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "AgentLease_pkey" PRIMARY KEY ("sessionId")
);

-- CreateIndex
CREATE INDEX "AgentLease_instanceId_idx" ON "AgentLease"("instanceId");

-- CreateIndex
CREATE INDEX "AgentLease_seenAt_idx" ON "AgentLease"("seenAt");

-- AddForeignKey
ALTER TABLE "AgentLease" ADD CONSTRAINT "AgentLease_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Resource"("id") ON DELETE CASCADE ON UPDATE CASCADE;
