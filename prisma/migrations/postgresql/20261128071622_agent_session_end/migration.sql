-- CreateTable
CREATE TABLE "AgentSessionEnd" (
    "sessionId" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "until" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "AgentSessionEnd_pkey" PRIMARY KEY ("sessionId")
);

-- CreateIndex
CREATE INDEX "AgentSessionEnd_until_idx" ON "AgentSessionEnd"("until");
