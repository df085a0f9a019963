-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_Reference" (
    "fromId" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "toId" TEXT NOT NULL,
    "onDelete" TEXT NOT NULL,
    "heldId" TEXT,

    PRIMARY KEY ("fromId", "path", "toId"),
    CONSTRAINT "Reference_fromId_fkey" FOREIGN KEY ("fromId") REFERENCES "Resource" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Reference_heldId_fkey" FOREIGN KEY ("heldId") REFERENCES "Resource" ("id") ON DELETE NO ACTION ON UPDATE NO ACTION
);
-- heldId backfilled (hand-written): restrict and cascade references hold their target; one
-- left dangling by the race this migration closes stays unheld rather than failing the migration.
INSERT INTO "new_Reference" ("fromId", "onDelete", "path", "toId", "heldId")
SELECT "fromId", "onDelete", "path", "toId",
       CASE WHEN "onDelete" <> 'keep' AND EXISTS (SELECT 1 FROM "Resource" r WHERE r."id" = "Reference"."toId") THEN "toId" END
FROM "Reference";
DROP TABLE "Reference";
ALTER TABLE "new_Reference" RENAME TO "Reference";
CREATE INDEX "Reference_toId_idx" ON "Reference"("toId");
CREATE INDEX "Reference_heldId_idx" ON "Reference"("heldId");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;
