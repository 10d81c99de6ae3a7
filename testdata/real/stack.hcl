# A group of three web servers running as local processes, health-checked
# over HTTP, behind HAProxy, and enrolled into an NFS exports file: the
# stack of testdata/docker with processes instead of containers.
#
# Each instance runs `webserver` (testdata/webserver), looked up in the PATH
# infrakit runs with: `go build -o bin/webserver ./testdata/webserver` (or
# `make demo-real`) and put bin/ in PATH. It listens on 127.0.0.1:$PORT,
# a port the process provider hands out from 21000-21999, and that address
# is what HAProxy routes to and the health check probes. The command is a
# shell only so that each server gets a fail file of its own: while
# fail/<instance ID> exists in the stack directory, that server's
# GET /health answers 500 and watch replaces it.
#
# The exports file is $INFRAKIT_NFS_EXPORTS_FILE; set it (and
# INFRAKIT_NFS_EXPORTFS=none on a machine that is no NFS server) before
# running infrakit, or the provider writes /etc/exports.d/infrakit.exports.
stack "real" {}

provider "process" {}     # instances "process"
provider "healthcheck" {} # flavor "healthcheck"
provider "haproxy" {}     # load balancers by any name
provider "nfsexports" {}  # NFS authorizations "exports"

group "web" {
  size = 3
  tags = { tier = "web" }

  instance {
    provider = process
    type     = "process"
    properties = {
      command      = "/bin/sh"
      args         = ["-c", "export WEBSERVER_FAIL_FILE=\"fail/$INFRAKIT_INSTANCE_ID\"; exec webserver"]
      ports        = { from = 21000, to = 21999 }
      kill_timeout = "2s"
    }
  }

  flavor {
    provider = healthcheck
    properties = {
      http                = { path = "/health" }
      timeout             = "1s"
      healthy_threshold   = 1
      unhealthy_threshold = 2
    }
  }

  health {
    grace = "2s"
  }
}

loadbalancer "web" { provider = haproxy }

ingress "web" {
  sync_interval = "2s"
  rule {
    loadbalancer = loadbalancer.web
    groups       = [group.web]
    route {
      lb_port     = 18090
      lb_protocol = "http"
      # Each member's address carries its own port, which HAProxy uses;
      # this port would apply only to a backend registered without one.
      port     = 80
      protocol = "http"
    }
  }
}

enrollment "exports" {
  source = group.web
  target {
    provider = nfsexports
    type     = "exports"
    properties = {
      # Every member is 127.0.0.1: a volume per member keeps the lines apart.
      host    = member.address
      volume  = "/srv/web/${member.id}"
      options = ["rw", "sync", "no_subtree_check"]
    }
  }
  sync_interval = "2s"
}
