# An autoscale block's min is at most its max.
stack "s" {}
provider "sim" {}
provider "prometheus" {}
group "web" {
  size = 3
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  autoscale {
    min = 5
    max = 3
    check "rps" {
      source              = prometheus
      query               = "sum(rate(web_requests_total[30s]))"
      target_per_instance = 50
    }
  }
}
