-- CreateTable
CREATE TABLE "AgentSessionEnd" (
    "sessionId" TEXT NOT NULL PRIMARY KEY,
    "reason" TEXT NOT NULL,
    "until" DATETIME NOT NULL
);

-- CreateIndex
CREATE INDEX "AgentSessionEnd_until_idx" ON "AgentSessionEnd"("until");
