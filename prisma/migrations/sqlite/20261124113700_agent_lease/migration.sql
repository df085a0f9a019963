-- CreateTable
CREATE TABLE "AgentLease" (
    "sessionId" TEXT NOT NULL PRIMARY KEY,
    "instanceId" TEXT NOT NULL,
    "seenAt" DATETIME NOT NULL,
    CONSTRAINT "AgentLease_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Resource" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "AgentLease_instanceId_idx" ON "AgentLease"("instanceId");

-- CreateIndex
CREATE INDEX "AgentLease_seenAt_idx" ON "AgentLease"("seenAt");
