package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/testwait"
)

// soFollowerStack is followerStack (group web, lb1, ingress site,
// enrollment nfs) with a second group api behind the same ingress, on the
// etcd backend with scale_out: four objects to share.
func soFollowerStack(endpoint, prefix string) string {
	body := strings.Replace(followerStack, `stack "test" {}`, fmt.Sprintf(`stack "test" {
  backend "etcd" {
    endpoints = [%q]
    prefix    = %q
    lease_ttl = %q
    scale_out = true
  }
}`, endpoint, prefix, haTTL.String()), 1)
	body = strings.Replace(body, `groups       = [group.web]`, `groups       = [group.web, group.api]`, 1)
	return body + `
group "api" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = {}
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo api"] }
  }
}
`
}

// soOwners waits until the running watches agree that every one of n
// objects has an owner and each holds its share (n/running, ±1), and
// returns each object's owner (the index of the watch).
func (c *haCluster) soOwners(what string, n int) map[string]int {
	c.t.Helper()
	var owners map[string]int
	testwait.For(c.t, 30*time.Second, what, func() bool {
		owners = map[string]int{}
		for i, r := range c.ws {
			if r == nil {
				continue
			}
			s, err := fetchStatus(r.addr)
			if err != nil || s.ScaleOut == nil || len(s.ScaleOut.Members) != c.running() || len(s.ScaleOut.Objects) != n {
				return false
			}
			for _, o := range s.ScaleOut.Objects {
				if o.Owner == "" {
					return false
				}
				if o.Mine {
					owners[o.Kind+"/"+o.Name] = i
				}
			}
		}
		held := map[int]int{}
		for _, i := range owners {
			held[i]++
		}
		for i, r := range c.ws {
			if r != nil && held[i] < n/c.running() {
				return false
			}
		}
		return len(owners) == n
	})
	return owners
}

// The ingress and the enrollment follow group membership whoever owns
// them: two scale-out watches share two groups, an ingress over both and
// an enrollment of one. Members removed behind infrakit's back are
// replaced by their group's owner, and lb1's backends and the
// authorizations come to equal the members again, also after the watch
// owning the ingress stops and the other takes everything.
func TestScaleOutFollowers(t *testing.T) {
	ep := etcdEndpoint(t)
	prefix := "/test/" + t.Name()
	c := newClusterOf(t, 2, prefix, func(int) string { return soFollowerStack(ep, prefix) })
	c.dirs[0].apply()
	for i := range c.ws {
		c.start(i, time.Second)
	}
	owners := c.soOwners("two watches own two objects each", 4)
	t.Logf("owners: %v", owners)
	if owners["ingress/site"] != owners["group/web"] || owners["ingress/site"] != owners["group/api"] {
		t.Log("the ingress and a group it routes to have different owners")
	}
	v := newFollowersView(t, c.dirs[0])
	converged := func(what string, gone ...string) {
		t.Helper()
		testwait.For(t, 30*time.Second, what, func() bool {
			by := c.groupInstances()
			web, api := by["web"], by["api"]
			if len(web) != 3 || len(api) != 2 {
				return false
			}
			for _, id := range gone {
				if slices.Contains(web, id) || slices.Contains(api, id) {
					return false
				}
			}
			members := slices.Sorted(slices.Values(append(slices.Clone(web), api...)))
			slices.Sort(web)
			return slices.Equal(v.backends(), members) && slices.Equal(v.authorized(), web)
		})
	}
	converged("lb1 and the enrollment equal to the members")

	remove := func(id string) {
		t.Helper()
		if err := os.Remove(filepath.Join(c.simDir, "instances", "compute", id+".json")); err != nil {
			t.Fatal(err)
		}
	}
	by := c.groupInstances()
	gone := []string{by["web"][0], by["api"][0]}
	for _, id := range gone {
		remove(id)
	}
	converged("the removed members replaced, deregistered and revoked", gone...)

	c.stopWatch(owners["ingress/site"])
	c.soOwners("the other watch owns all four", 4)
	gone = []string{c.groupInstances()["web"][0]}
	remove(gone[0])
	converged("a member removed after the ingress moved replaced, deregistered and revoked", gone...)
}
