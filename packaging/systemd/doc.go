// Package systemd holds the systemd unit that runs `infrakit watch` as a
// service, infrakit-watch.service, and its tests: the unit passes
// `systemd-analyze verify`, and what it runs (the watch command, its
// flags, its reload and stop signals) matches the infrakit binary built
// from this tree. Installing and running it: website/watch.md, "Running
// watch as a systemd service".
//
// The package has no non-test code; this file only documents it.
package systemd
