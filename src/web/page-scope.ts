import type { FastifyInstance, FastifyReply } from 'fastify';
import { acceptForms } from './form.js';
import { renderErrors } from '../http/framework-errors.js';
import { CSS, type Html, layout, markup, PageError } from './html.js';

/** CSP of every page: no scripts at all, styles from our own stylesheet, never framed (clickjacking). */
export function contentSecurityPolicy(formAction: string[] = ["'self'"]): string {
  return [
    "default-src 'none'",
    "style-src 'self'",
    "img-src 'self'",
    `form-action ${formAction.join(' ')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/** Makes an encapsulated scope serve HTML pages: form bodies, security headers, errors rendered as pages. */
export function pageScope(app: FastifyInstance): void {
  acceptForms(app);
  app.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('content-security-policy'))
      reply.header('content-security-policy', contentSecurityPolicy());
    reply.header('x-frame-options', 'DENY');
    reply.header('x-content-type-options', 'nosniff');
    // same-origin: no Referer leaves the site, yet same-origin form posts keep a real Origin (no-referrer makes it "null").
    reply.header('referrer-policy', 'same-origin');
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });
  renderErrors(app, {
    own: (error, _request, reply) =>
      error instanceof PageError
        ? sendPage(reply, error.status, error.title, markup`<p class="error">${error.message}</p>`)
        : undefined,
    classified: (error, request, reply) => {
      const [title, text] =
        PAGE_TEXTS[error.kind === 'internal' || error.kind === 'unavailable' ? error.kind : 'bad'];
      return sendPage(
        reply,
        error.status,
        title,
        markup`<p class="error">${text.replace('%id', request.id)}</p>`,
      );
    },
  });
  app.get('/assets/dashboard.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(CSS),
  );
}

const PAGE_TEXTS = {
  bad: ['Bad request', 'The request could not be read.'],
  unavailable: [
    'Temporarily unavailable',
    'The service cannot answer right now. Try again in a few seconds.',
  ],
  internal: ['Something went wrong', 'An internal error occurred. Quote %id if you report it.'],
} as const;

export function sendPage(
  reply: FastifyReply,
  status: number,
  title: string | Html,
  body: ReturnType<typeof markup>,
  nav?: { signedInAs: string; csrf: string },
): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .send(layout({ title, body, ...(nav ? { signedInAs: nav.signedInAs, csrf: nav.csrf } : {}) }));
}
