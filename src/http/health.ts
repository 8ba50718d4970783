import process from 'node:process';
import type { FastifyInstance } from 'fastify';

/**
 * GET /health, liveness: the process serves (SPEC §2.3's health result, whole seconds of uptime). Every host answers
 * it (docs/deployment.md): the REST API's within its own scope, where its contract's errors and headers apply; the
 * others at their root (app.ts).
 */
export function healthRoute(app: FastifyInstance): void {
  app.get('/health', async (_request, reply) =>
    reply
      .header('cache-control', 'no-store')
      .send({ status: 'healthy', uptime: Math.floor(process.uptime()) }),
  );
}
