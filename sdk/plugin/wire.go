package plugin

import "google.golang.org/grpc"

// flowWindow is the HTTP/2 flow-control window of each stream and of the
// connection, on both ends. Setting it turns off gRPC's dynamic window (BDP
// estimation), which otherwise sends a PING with every message it receives
// and answers the peer's: on a unix socket that is one more write and read,
// and as many goroutine wake-ups, per call on each end, a third of a call's
// system calls. 1 MiB lets a large answer (a DescribeInstances of thousands
// of instances) through without waiting for window updates; it is credit,
// not memory.
const flowWindow = 1 << 20

// streamWorkers is how many goroutines of a provider's gRPC server take
// calls, instead of one new goroutine per call whose stack grows (copying
// itself) to the depth of a handler on every call. Long-lived streams (the
// go-plugin stdio and broker streams, Watch) hold a worker each; when all are
// busy a call gets a new goroutine, as without workers.
const streamWorkers = 8

// dialOptions are the host's gRPC options for the connection to a provider.
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(flowWindow),
		grpc.WithInitialConnWindowSize(flowWindow),
	}
}

// newGRPCServer builds a provider's gRPC server; go-plugin passes the options
// it needs (TLS).
func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts,
		grpc.InitialWindowSize(flowWindow),
		grpc.InitialConnWindowSize(flowWindow),
		grpc.NumStreamWorkers(streamWorkers),
	)
	return grpc.NewServer(opts...)
}
