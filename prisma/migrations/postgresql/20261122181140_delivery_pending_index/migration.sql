-- DropIndex
DROP INDEX "Delivery_nextAttemptAt_idx";

-- CreateIndex
CREATE INDEX "Delivery_deliveredAt_nextAttemptAt_idx" ON "Delivery"("deliveredAt", "nextAttemptAt");
