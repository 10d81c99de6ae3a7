stack "mystack" {}

provider "simulator" {}                      # instances "compute"; load balancers lb1, lb2, lb3
provider "simulator" { alias = "nfs-auth" }  # a second simulator process, used for NFS authorizations
provider "vanilla" {}

group "miners" {
  size = 5
  tags = { project = "e2e", user = "infrakit" }
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "custom field for miners" }
  }
  flavor {
    provider   = vanilla
    properties = {
      init = ["curl -sSL https://get.docker.com | sh", "docker run -d -p 80:80 stuff/miner"]
      tags = { project = "infrakit", tier = "miners" }
    }
  }
}

group "cattle" {
  size = 10
  instance {
    provider   = simulator
    type       = "compute"
    properties = { custom_notes = "This is custom for cattle" }
  }
  flavor {
    provider   = vanilla
    properties = { init = ["sudo apt-get install -y something"], tags = { tier = "web" } }
  }
}

loadbalancer "lb1" { provider = simulator }
loadbalancer "lb2" { provider = simulator }
loadbalancer "lb3" { provider = simulator }

ingress "test.com" {
  sync_interval = "3s"
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.miners]
    route {
      lb_port     = 80
      lb_protocol = "https"
      port        = 80
      protocol    = "http"
      certificate = "external-cer-id1"
    }
  }
  rule {
    loadbalancer = loadbalancer.lb2
    groups       = [group.miners]
    route {
      lb_port     = 8080
      lb_protocol = "https"
      port        = 8080
      protocol    = "http"
      certificate = "external-cer-id2"
    }
  }
  rule {
    loadbalancer = loadbalancer.lb3
    groups       = [group.cattle]
    route {
      lb_port     = 8888
      lb_protocol = "https"
      port        = 8888
      protocol    = "http"
      certificate = "external-cer-id3"
    }
  }
}

enrollment "nfs" {
  source = group.cattle
  target {
    provider   = simulator.nfs-auth
    type       = "disk"
    properties = { host = member.id, iops = 10 }   # member = each source instance
  }
  sync_interval = "5s"
}
