-- CreateTable
CREATE TABLE "Resource" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "kind" TEXT NOT NULL,
    "parentId" TEXT,
    "createdAt" DATETIME NOT NULL,
    "updatedAt" DATETIME NOT NULL,
    "data" JSONB NOT NULL,
    "sealed" TEXT,
    CONSTRAINT "Resource_parentId_fkey" FOREIGN KEY ("parentId") REFERENCES "Resource" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Reference" (
    "fromId" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "toId" TEXT NOT NULL,
    "onDelete" TEXT NOT NULL,

    PRIMARY KEY ("fromId", "path", "toId"),
    CONSTRAINT "Reference_fromId_fkey" FOREIGN KEY ("fromId") REFERENCES "Resource" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "UniqueKey" (
    "scope" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "resourceId" TEXT NOT NULL,

    PRIMARY KEY ("scope", "value"),
    CONSTRAINT "UniqueKey_resourceId_fkey" FOREIGN KEY ("resourceId") REFERENCES "Resource" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Token" (
    "digest" TEXT NOT NULL PRIMARY KEY,
    "resourceId" TEXT NOT NULL,
    CONSTRAINT "Token_resourceId_fkey" FOREIGN KEY ("resourceId") REFERENCES "Resource" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Event" (
    "seq" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "id" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "resourceId" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "createdAt" DATETIME NOT NULL
);

-- CreateTable
CREATE TABLE "Delivery" (
    "destinationId" TEXT NOT NULL,
    "eventSeq" INTEGER NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "deliveredAt" DATETIME,
    "nextAttemptAt" DATETIME NOT NULL,
    "lastError" TEXT,

    PRIMARY KEY ("destinationId", "eventSeq")
);

-- CreateTable
CREATE TABLE "Setting" (
    "key" TEXT NOT NULL PRIMARY KEY,
    "value" TEXT NOT NULL
);

-- CreateIndex
CREATE INDEX "Resource_kind_id_idx" ON "Resource"("kind", "id");

-- CreateIndex
CREATE INDEX "Resource_parentId_idx" ON "Resource"("parentId");

-- CreateIndex
CREATE INDEX "Reference_toId_idx" ON "Reference"("toId");

-- CreateIndex
CREATE INDEX "UniqueKey_resourceId_idx" ON "UniqueKey"("resourceId");

-- CreateIndex
CREATE UNIQUE INDEX "Token_resourceId_key" ON "Token"("resourceId");

-- CreateIndex
CREATE UNIQUE INDEX "Event_id_key" ON "Event"("id");

-- CreateIndex
CREATE INDEX "Event_type_idx" ON "Event"("type");

-- CreateIndex
CREATE INDEX "Delivery_nextAttemptAt_idx" ON "Delivery"("nextAttemptAt");
