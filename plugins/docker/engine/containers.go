package engine

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ContainerConfig is the body of POST /containers/create (the fields used here).
type ContainerConfig struct {
	Image        string              `json:"Image"`
	Cmd          []string            `json:"Cmd,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	// StopTimeout is the grace in seconds a stop gives the container.
	StopTimeout *int       `json:"StopTimeout,omitempty"`
	HostConfig  HostConfig `json:"HostConfig"`
	// NetworkingConfig sets the container's endpoint on its network (a
	// fixed IP, aliases); nil lets Docker choose.
	NetworkingConfig *NetworkingConfig `json:"NetworkingConfig,omitempty"`
}

// NetworkingConfig is the endpoint settings of a create, by network name.
type NetworkingConfig struct {
	EndpointsConfig map[string]EndpointSettings `json:"EndpointsConfig"`
}

// EndpointSettings is how a container attaches to one network.
type EndpointSettings struct {
	IPAMConfig *EndpointIPAM `json:"IPAMConfig,omitempty"`
	Aliases    []string      `json:"Aliases,omitempty"`
}

// EndpointIPAM is the address a container asks for on a network.
type EndpointIPAM struct {
	IPv4Address string `json:"IPv4Address,omitempty"`
}

// HostConfig is the part of a container's configuration that depends on the host.
type HostConfig struct {
	NetworkMode   string                   `json:"NetworkMode,omitempty"`
	PortBindings  map[string][]PortBinding `json:"PortBindings,omitempty"`
	NanoCPUs      int64                    `json:"NanoCpus,omitempty"`
	Memory        int64                    `json:"Memory,omitempty"`
	RestartPolicy RestartPolicy            `json:"RestartPolicy"`
	AutoRemove    bool                     `json:"AutoRemove,omitempty"`
}

// PortBinding publishes a container port on the host; an empty HostPort
// lets Docker choose one.
type PortBinding struct {
	HostIP   string `json:"HostIp,omitempty"`
	HostPort string `json:"HostPort"`
}

// RestartPolicy is Docker's restart policy: "no", "always",
// "unless-stopped" or "on-failure" (with MaximumRetryCount).
type RestartPolicy struct {
	Name              string `json:"Name"`
	MaximumRetryCount int    `json:"MaximumRetryCount,omitempty"`
}

// Created is the answer to a create.
type Created struct {
	ID       string   `json:"Id"`
	Warnings []string `json:"Warnings"`
}

// Container is one entry of GET /containers/json.
type Container struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Image  string            `json:"Image"`
	Labels map[string]string `json:"Labels"`
	// State is created, restarting, running, removing, paused, exited or dead.
	State      string `json:"State"`
	Status     string `json:"Status"`
	Created    int64  `json:"Created"`
	HostConfig struct {
		NetworkMode string `json:"NetworkMode"`
	} `json:"HostConfig"`
	NetworkSettings struct {
		Networks map[string]Endpoint `json:"Networks"`
	} `json:"NetworkSettings"`
}

// Endpoint is a container's attachment to one network.
type Endpoint struct {
	NetworkID string `json:"NetworkID"`
	IPAddress string `json:"IPAddress"`
}

// ContainerJSON is what GET /containers/{id}/json answers (the fields used here).
type ContainerJSON struct {
	ID    string `json:"Id"`
	Name  string `json:"Name"`
	State struct {
		Status   string `json:"Status"`
		Running  bool   `json:"Running"`
		ExitCode int    `json:"ExitCode"`
	} `json:"State"`
	Config struct {
		Image       string            `json:"Image"`
		Labels      map[string]string `json:"Labels"`
		StopTimeout *int              `json:"StopTimeout"`
	} `json:"Config"`
	HostConfig struct {
		NetworkMode string `json:"NetworkMode"`
		AutoRemove  bool   `json:"AutoRemove"`
	} `json:"HostConfig"`
	NetworkSettings struct {
		Networks map[string]Endpoint `json:"Networks"`
	} `json:"NetworkSettings"`
}

// ContainerCreate creates a container; name may be empty (Docker picks one).
// A missing image is a 404 (IsNotFound): creating never pulls.
func (c *Client) ContainerCreate(ctx context.Context, name string, cfg ContainerConfig) (Created, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	var out Created
	err := c.send(ctx, request{method: http.MethodPost, path: "/containers/create", query: q, body: cfg}, &out)
	return out, err
}

// ContainerStart starts a created container; starting a running one is not an error.
func (c *Client) ContainerStart(ctx context.Context, id string) error {
	return c.send(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/start"}, nil)
}

// ContainerStop sends the container's stop signal, waits up to grace for it
// to exit and then kills it. grace < 0 uses the container's own StopTimeout.
// Stopping a stopped container is not an error.
func (c *Client) ContainerStop(ctx context.Context, id string, grace time.Duration) error {
	q := url.Values{}
	extra := 10 * time.Second // Docker's own default grace
	if grace >= 0 {
		secs := int(math.Ceil(grace.Seconds()))
		q.Set("t", strconv.Itoa(secs))
		extra = time.Duration(secs) * time.Second
	}
	return c.send(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/stop", query: q, extra: extra}, nil)
}

// ContainerKill sends signal ("KILL", "TERM"...) to the container.
func (c *Client) ContainerKill(ctx context.Context, id, signal string) error {
	q := url.Values{}
	if signal != "" {
		q.Set("signal", signal)
	}
	return c.send(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/kill", query: q}, nil)
}

// ContainerRemove removes a container and its anonymous volumes; force
// kills it first if it runs.
func (c *Client) ContainerRemove(ctx context.Context, id string, force bool) error {
	q := url.Values{"v": {"1"}}
	if force {
		q.Set("force", "1")
	}
	return c.send(ctx, request{method: http.MethodDelete, path: "/containers/" + url.PathEscape(id), query: q}, nil)
}

// ContainerWait blocks until the container meets condition ("not-running",
// "next-exit" or "removed"); a container that does not exist (any more) is
// a 404 (IsNotFound).
func (c *Client) ContainerWait(ctx context.Context, id, condition string) error {
	q := url.Values{"condition": {condition}}
	var out struct {
		StatusCode int `json:"StatusCode"`
		Error      *struct {
			Message string `json:"Message"`
		} `json:"Error"`
	}
	return c.send(ctx, request{method: http.MethodPost, path: "/containers/" + url.PathEscape(id) + "/wait", query: q}, &out)
}

// ContainerInspect returns one container; a missing one is a 404 (IsNotFound).
func (c *Client) ContainerInspect(ctx context.Context, id string) (ContainerJSON, error) {
	var out ContainerJSON
	err := c.send(ctx, request{method: http.MethodGet, path: "/containers/" + url.PathEscape(id) + "/json"}, &out)
	return out, err
}

// ContainerList lists the containers (stopped ones too) matching every filter.
func (c *Client) ContainerList(ctx context.Context, f Filters) ([]Container, error) {
	q := url.Values{"all": {"1"}}
	if len(f) > 0 {
		q.Set("filters", f.encode())
	}
	var out []Container
	err := c.send(ctx, request{method: http.MethodGet, path: "/containers/json", query: q}, &out)
	return out, err
}

// ImageInspect reports whether the image (name:tag or ID) is present on the
// Engine's host; it never pulls.
func (c *Client) ImageInspect(ctx context.Context, name string) (bool, error) {
	err := c.send(ctx, request{method: http.MethodGet, path: "/images/" + name + "/json"}, nil)
	switch {
	case err == nil:
		return true, nil
	case IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}

// ImageRemove removes an image tag (and the image when it was the last);
// a missing image is not an error.
func (c *Client) ImageRemove(ctx context.Context, name string, force bool) error {
	q := url.Values{}
	if force {
		q.Set("force", "1")
	}
	err := c.send(ctx, request{method: http.MethodDelete, path: "/images/" + name, query: q}, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}
