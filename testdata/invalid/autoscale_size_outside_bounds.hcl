# The size is the start size: within the autoscale bounds.
stack "s" {}
provider "sim" {}
provider "prometheus" {}
group "web" {
  size = 20
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  autoscale {
    min = 2
    max = 12
    check "rps" {
      source              = prometheus
      query               = "sum(rate(web_requests_total[30s]))"
      target_per_instance = 50
    }
  }
}
