# Pets need at least one logical ID.
stack "s" {}
provider "sim" {}
group "g" {
  logical_ids = []
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
