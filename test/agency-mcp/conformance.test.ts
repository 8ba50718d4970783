import { join } from 'node:path';
import { startBearerProxy } from '../helpers/bearer-proxy.js';
import { describeConformance } from '../helpers/conformance.js';
import { ENGINE, startTestServer } from '../helpers/harness.js';
import { grant } from './helpers.js';

/**
 * The official MCP conformance runner's generic server scenarios against the agency MCP server at
 * `{AGENCY_MCP_URL}/mcp`, through the bearer-adding proxy with a valid agency access token (ada, owner of Northwind
 * Studio, both scopes, her whole role as the ceiling), at the 2026-07-28 and 2025-11-25 requirement sets.
 */
describeConformance({
  title: `MCP conformance runner against the agency MCP server (${ENGINE})`,
  baselineFile: (requirements) =>
    join(import.meta.dirname, `conformance-expected-failures-${requirements}.yaml`),
  /**
   * What a failing check inside a baselined scenario must point at: the runner's fixture surface, the absence of 2025
   * sessions (a warning), or a resources/* or prompts/* method this server does not offer (-32601 Method not found).
   */
  explained:
    /test_\w+|test:\/\/|json_schema_2020_12_tool|Method not found|got -32601|diagnostic tool|Prerequisite failed|Expected InputRequiredResult|re-request|list_changed|did not provide session ID/,
  async start() {
    const server = await startTestServer();
    const { token } = await grant(server);
    const proxy = await startBearerProxy(`${server.url.agencyMcp}/mcp`, token);
    return {
      url: proxy.url,
      async close() {
        await proxy.close();
        await server.close();
      },
    };
  },
});
