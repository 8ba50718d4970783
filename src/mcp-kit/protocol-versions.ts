/**
 * The MCP protocol revisions our MCP hosts serve (docs/contract.md#surfaces): 2026-07-28 on the per-request wire (negotiated by
 * `server/discover`), and the two 2025 revisions through `initialize`. The SDK's `initialize` answers a version it
 * does not list with the first 2025-era entry (MCP 2025-11-25 lifecycle §Version Negotiation), and its 2025 transport
 * refuses other `MCP-Protocol-Version` headers with 400 naming this list.
 */
export const MCP_PROTOCOL_VERSIONS = ['2026-07-28', '2025-11-25', '2025-06-18'];
