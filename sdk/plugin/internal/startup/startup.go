// Package startup prepares a provider process for serving before most of the
// packages it links initialise. Go initialises a package once its imports
// are, taking ready packages in import-path order, so this package's init
// runs as soon as os and runtime are ready: in a provider, 23rd of 168 inits,
// before protobuf, gRPC and go-plugin set up. It acts only in a process
// started as a provider, one whose environment holds the handshake cookie a
// host sets (MagicCookieKey); the host binary, which also links package
// plugin, is left alone.
//
// It does two things.
//
// It runs the provider's Go code on one thread (GOMAXPROCS=1), unless the
// GOMAXPROCS environment variable says otherwise. A provider serves one host
// and its work is I/O (cloud APIs, Docker, files): blocking system calls do
// not hold the thread, and goroutines still run concurrently. With a second
// thread allowed, the scheduler wakes a second OS thread for each of the
// 4-6 goroutine hand-offs of every gRPC call (reader, handler, writer), which
// spins and sleeps again: on the 2-core machine the targets are measured on
// that is a third of the provider's CPU per call and a fifth of a call's
// round trip, and some CPU taken from the host. A provider that does heavy
// computation calls runtime.GOMAXPROCS in its main, which wins over this.
//
// It maps in, with a few system calls, memory the provider would otherwise
// fault in one page at a time (see Prefault): from exec to its first answer a
// go-plugin provider touches about 750 pages, and on a virtual machine each
// page fault traps into the hypervisor.
package startup

import (
	"os"
	"runtime"
)

// The go-plugin handshake cookie of infrakit providers. It lives here rather
// than in package plugin because this package must recognise a provider
// process before package plugin (and go-plugin) are initialised. It is not a
// security measure.
const (
	MagicCookieKey   = "INFRAKIT_PROVIDER_PLUGIN"
	MagicCookieValue = "7b1f0c9e4a52d8e36f0b1a9c7d24e5f8c3a6b0d9e1f27485"
)

func init() {
	if os.Getenv(MagicCookieKey) != MagicCookieValue {
		return
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	Prefault()
}
