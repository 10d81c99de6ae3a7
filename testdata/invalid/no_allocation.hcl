# Neither size nor logical_ids.
stack "s" {}
provider "sim" {}
group "g" {
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
