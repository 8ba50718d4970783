import { z } from 'zod';
import { ERROR_CATALOGUE, type ErrorCode } from '../http/errors.js';

export const HealthSchema = z
  .object({
    status: z.literal('healthy').describe('Always `healthy`.'),
    uptime: z.int().min(0).describe('Whole seconds since the process started.'),
  })
  .describe('The process is serving.');

const ERROR_TYPES = [
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'rate_limit_error',
  'api_error',
] as const;

export const ErrorBodySchema = z
  .object({
    error: z.object({
      type: z.enum(ERROR_TYPES).describe('Broad category.'),
      code: z
        .enum(Object.keys(ERROR_CATALOGUE) as [ErrorCode, ...ErrorCode[]])
        .describe('Stable machine-readable error code; branch on this, never on the message.'),
      message: z.string().describe('Human-readable; may change without notice.'),
      param: z.string().optional().describe('The request parameter the error relates to.'),
      request_id: z.string().describe('Equals the x-request-id response header.'),
    }),
  })
  .describe('An error (docs/contract.md#errors).');
