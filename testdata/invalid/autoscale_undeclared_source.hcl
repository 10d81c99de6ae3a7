# A check's source is a declared provider (a typo).
stack "s" {}
provider "sim" {}
provider "prometheus" {}
group "web" {
  size = 2
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  autoscale {
    min = 2
    max = 12
    check "rps" {
      source              = promethues
      query               = "sum(rate(web_requests_total[30s]))"
      target_per_instance = 50
    }
  }
}
