// Package codexrpc is the JSON-RPC connection to a codex app-server:
// newline-delimited JSON over stdio, client requests matched to responses by
// id, notifications, and server requests that are answered exactly once
// (Request.Reply), possibly long after they arrived. It also holds the typed
// messages of the handshake and of the thread and turn lifecycle.
//
// Conn.Run is the only reader; writes are serialised by one lock. Handlers
// are called on the reader and must not block.
package codexrpc
