-- CreateTable
CREATE TABLE "StackLock" (
    "stack" TEXT NOT NULL PRIMARY KEY,
    "lockId" TEXT NOT NULL,
    "host" TEXT NOT NULL,
    "pid" INTEGER NOT NULL,
    "command" TEXT NOT NULL,
    "who" TEXT NOT NULL,
    "createdAt" BIGINT NOT NULL,
    "expiresAt" BIGINT NOT NULL
);
