// The baseline: the least a Node HTTP server can do to answer a JSON GET.
import { createServer } from 'node:http';

const body = JSON.stringify({
  object: 'user',
  id: 'usr_0000000000000000000000',
  username: 'ada',
  image_url: null,
});
const server = createServer((_req, res) => {
  res.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
});
server.listen(0, '127.0.0.1', () => console.log(`bare http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
