# The stack of the multi-host scale-out test (e2e/scaleout_docker_test.go):
# three `infrakit watch` managers share its state in etcd (the container
# reachable as "etcd" on the test's private network) with scale_out on, so
# each of the nine groups is leased to one manager at a time; they share
# one simulator store (a shared directory), the "cloud" every manager could
# act on; the test counts each group's instances there by their
# infrakit.group tag.
stack "scaleout" {
  backend "etcd" {
    endpoints = ["http://etcd:2379"]
    prefix    = "/infrakit/scaleout"
    lease_ttl = "2s"
    scale_out = true
  }
}

provider "simulator" {}

group "g1" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g2" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g3" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g4" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g5" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g6" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g7" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g8" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}

group "g9" {
  size = 2
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "scaleout" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}
