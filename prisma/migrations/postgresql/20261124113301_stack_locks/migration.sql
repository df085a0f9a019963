-- CreateTable
CREATE TABLE "StackLock" (
    "stack" TEXT NOT NULL,
    "lockId" TEXT NOT NULL,
    "host" TEXT NOT NULL,
    "pid" INTEGER NOT NULL,
    "command" TEXT NOT NULL,
    "who" TEXT NOT NULL,
    "createdAt" BIGINT NOT NULL,
    "expiresAt" BIGINT NOT NULL,

    CONSTRAINT "StackLock_pkey" PRIMARY KEY ("stack")
);
