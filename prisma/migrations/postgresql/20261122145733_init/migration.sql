-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "Resource" (
    "id" TEXT COLLATE "C" NOT NULL,
    "kind" TEXT NOT NULL,
    "parentId" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "data" JSONB NOT NULL,
    "sealed" TEXT,

    CONSTRAINT "Resource_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Reference" (
    "fromId" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "toId" TEXT NOT NULL,
    "onDelete" TEXT NOT NULL,

    CONSTRAINT "Reference_pkey" PRIMARY KEY ("fromId","path","toId")
);

-- CreateTable
CREATE TABLE "UniqueKey" (
    "scope" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "resourceId" TEXT NOT NULL,

    CONSTRAINT "UniqueKey_pkey" PRIMARY KEY ("scope","value")
);

-- CreateTable
CREATE TABLE "Token" (
    "digest" TEXT NOT NULL,
    "resourceId" TEXT NOT NULL,

    CONSTRAINT "Token_pkey" PRIMARY KEY ("digest")
);

-- CreateTable
CREATE TABLE "Event" (
    "seq" SERIAL NOT NULL,
    "id" TEXT COLLATE "C" NOT NULL,
    "type" TEXT NOT NULL,
    "resourceId" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Event_pkey" PRIMARY KEY ("seq")
);

-- CreateTable
CREATE TABLE "Delivery" (
    "destinationId" TEXT NOT NULL,
    "eventSeq" INTEGER NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "deliveredAt" TIMESTAMP(3),
    "nextAttemptAt" TIMESTAMP(3) NOT NULL,
    "lastError" TEXT,

    CONSTRAINT "Delivery_pkey" PRIMARY KEY ("destinationId","eventSeq")
);

-- CreateTable
CREATE TABLE "Setting" (
    "key" TEXT NOT NULL,
    "value" TEXT NOT NULL,

    CONSTRAINT "Setting_pkey" PRIMARY KEY ("key")
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

-- AddForeignKey
ALTER TABLE "Resource" ADD CONSTRAINT "Resource_parentId_fkey" FOREIGN KEY ("parentId") REFERENCES "Resource"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Reference" ADD CONSTRAINT "Reference_fromId_fkey" FOREIGN KEY ("fromId") REFERENCES "Resource"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UniqueKey" ADD CONSTRAINT "UniqueKey_resourceId_fkey" FOREIGN KEY ("resourceId") REFERENCES "Resource"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Token" ADD CONSTRAINT "Token_resourceId_fkey" FOREIGN KEY ("resourceId") REFERENCES "Resource"("id") ON DELETE CASCADE ON UPDATE CASCADE;
