# The stack of the multi-host HA test (e2e/hadocker_test.go): three
# managers share its state in etcd (the container reachable as "etcd" on the
# test's private network) and one simulator store (a shared directory), so
# only the leader may create or destroy instances.
stack "ha" {
  backend "etcd" {
    endpoints = ["http://etcd:2379"]
    prefix    = "/infrakit/ha"
    lease_ttl = "2s"
  }
}

provider "simulator" {}

group "web" {
  size = 3
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "ha" }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
}
