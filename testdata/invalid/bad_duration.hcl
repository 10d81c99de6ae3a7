# Durations are written like "5m".
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  update { health_timeout = "5 minutes" }
}
