# A group of three web containers on the local Docker Engine, health-checked
# over HTTP, behind HAProxy, and enrolled into an NFS exports file.
#
# The containers run the image infrakit-docker-web:latest, built FROM scratch
# around testdata/docker/webserver (testdata/docker/build-image.sh does it;
# `make demo-docker` too): infrakit never pulls, so it must be on the host.
stack "docker" {}

provider "docker" {}      # instances "container"
provider "healthcheck" {} # flavor "healthcheck"
provider "haproxy" {}     # load balancers by any name
provider "nfsexports" {}  # NFS authorizations "exports"

group "web" {
  size = 3
  tags = { tier = "web" }

  instance {
    provider = docker
    type     = "container"
    properties = {
      image  = "infrakit-docker-web:latest"
      env    = { PORT = "8080" }
      memory = "32m"
      # No ports: the Address is the container's IP alone, which HAProxy
      # pairs with the route's port and the exports file takes as a host.
    }
  }

  flavor {
    provider = healthcheck
    properties = {
      http = { path = "/health" }
      port = 8080
    }
  }

  health {
    grace = "5s"
  }
}

loadbalancer "web" { provider = haproxy }

ingress "web" {
  sync_interval = "2s"
  rule {
    loadbalancer = loadbalancer.web
    groups       = [group.web]
    route {
      lb_port     = 18080
      lb_protocol = "http"
      port        = 8080
      protocol    = "http"
    }
  }
}

enrollment "exports" {
  source = group.web
  target {
    provider = nfsexports
    type     = "exports"
    properties = {
      host    = member.address
      volume  = "/srv/web"
      options = ["rw", "sync", "no_subtree_check"]
    }
  }
  sync_interval = "2s"
}
