# Durations are written like "10s".
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
    min                 = 2
    max                 = 12
    evaluation_interval = "10 seconds"
    check "rps" {
      source              = prometheus
      query               = "sum(rate(web_requests_total[30s]))"
      target_per_instance = 50
    }
  }
}
