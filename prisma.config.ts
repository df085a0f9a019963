import { defineConfig } from 'prisma/config';

// Used by `prisma generate` only; the server applies migrations itself (server/store/migrate.ts).
export default defineConfig({ schema: 'prisma/schema.prisma' });
