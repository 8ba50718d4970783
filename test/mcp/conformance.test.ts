import { join } from 'node:path';
import { type BearerProxy, startBearerProxy } from '../helpers/bearer-proxy.js';
import { describeConformance } from '../helpers/conformance.js';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * The official MCP conformance runner against the user MCP server, at the 2026-07-28 and 2025-11-25
 * requirement sets (test/helpers/conformance.ts). The runner needs Node 22, fetched as a registry package
 * (`npx -p node@22`); only when that cannot be installed is the suite skipped, and the reason printed.
 */
describeConformance({
  title: 'MCP conformance runner',
  baselineFile: (requirements) =>
    join(import.meta.dirname, `conformance-expected-failures-${requirements}.yaml`),
  /**
   * What a failing check inside a baselined scenario must point at: the runner's fixture surface, or (the one warning
   * that is a design choice) the absence of 2025 sessions. Anything else is a defect of ours.
   */
  explained:
    /test_\w+|test:\/\/|json_schema_2020_12_tool|Method not found|diagnostic tool|Prerequisite failed|Expected InputRequiredResult|re-request|list_changed|did not provide session ID/,
  async start() {
    const server: TestServer = await startTestServer();
    const { token } = await signIn(server, 'ada');
    const proxy: BearerProxy = await startBearerProxy(`${server.url.mcp}/mcp`, token);
    return {
      url: proxy.url,
      async close() {
        await proxy.close();
        await server.close();
      },
    };
  },
});
