-- AlterTable
ALTER TABLE "Reference" ADD COLUMN     "heldId" TEXT;

-- Backfill (hand-written): restrict and cascade references hold their target. One left
-- dangling by the race this migration closes stays unheld rather than failing the migration.
UPDATE "Reference" SET "heldId" = "toId"
WHERE "onDelete" <> 'keep' AND EXISTS (SELECT 1 FROM "Resource" r WHERE r."id" = "Reference"."toId");

-- CreateIndex
CREATE INDEX "Reference_heldId_idx" ON "Reference"("heldId");

-- AddForeignKey
ALTER TABLE "Reference" ADD CONSTRAINT "Reference_heldId_fkey" FOREIGN KEY ("heldId") REFERENCES "Resource"("id") ON DELETE NO ACTION ON UPDATE NO ACTION;
