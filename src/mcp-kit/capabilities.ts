/**
 * What a list capability of these servers can promise. `listChanged` says the server will send
 * `notifications/tools/list_changed` (or resources') when the list changes (MCP 2025-11-25 server/tools and
 * server/resources, Capabilities). Every request here is served by a fresh server that publishes no event: no
 * notification reaches a 2025 client, which has no stream to receive one, nor a 2026-07-28 `subscriptions/listen`
 * stream. The SDK's McpServer turns the bit on when a tool or resource is registered unless the server says otherwise;
 * left on, a client would wait for notifications that never come, and `subscriptions/listen` would acknowledge a
 * filter it cannot serve. A client re-lists when it needs to (the agency's tools follow the member's permissions).
 */
export const LIST_WITHOUT_NOTIFICATIONS = { listChanged: false } as const;
