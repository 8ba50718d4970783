// The MCP baseline: the SDK's plain createMcpHandler serving one trivial tool, no auth, on bare node:http — a new
// McpServer per request with the SDK's defaults, exactly as its documentation shows.
import { createServer } from 'node:http';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';

const handler = createMcpHandler(() => {
  const server = new McpServer({ name: 'baseline', version: '1.0.0' });
  server.registerTool('ping', { description: 'Answers pong' }, async () => ({
    content: [{ type: 'text', text: 'pong' }],
  }));
  return server;
});
const serve = toNodeHandler(handler);
const server = createServer((req, res) => void serve(req, res));
server.listen(0, '127.0.0.1', () => console.log(`baseline http://127.0.0.1:${server.address().port}/mcp`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
