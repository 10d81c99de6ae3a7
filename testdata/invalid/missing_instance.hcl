# A group without an instance block.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  flavor { provider = sim }
}
