# A logical ID listed twice.
stack "s" {}
provider "sim" {}
group "g" {
  logical_ids = ["10.0.0.1", "10.0.0.2", "10.0.0.1"]
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
