// Package status is what `infrakit watch` reports and how it serves it.
//
// A Recorder holds the service's picture of itself: per group the desired
// and actual sizes, health counts, rolling progress and the mass-failure
// brake; globally the passes, leadership and the providers being supervised;
// a ring of recent actions (events); and the Prometheus metrics, kept on a
// registry of its own (never the process-global one, so two watch instances
// in one test binary never collide). The reconcile loop is its only writer:
// it calls SetGroup after reconciling each group, ObservePass after each
// pass, and Replacement, ProviderError, ProviderRestart and Event as things
// happen. Readers (HTTP handlers, scrapes, tests) may read at any time.
//
// A Server serves a Recorder over HTTP: GET /v1/status, GET /v1/events and
// GET /metrics. Its caller owns it: Start binds the address and serves in a
// goroutine, Shutdown drains requests in flight within the caller's context
// and returns only once that goroutine has ended.
//
// The JSON shapes are a contract with users (website/watch.md documents
// them): fields are added, never renamed or removed, and every field is
// always present (null for a time that has not happened yet). Times are
// UTC.
package status
