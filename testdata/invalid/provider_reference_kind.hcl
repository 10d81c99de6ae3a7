# A provider attribute that names a group.
stack "s" {}
provider "sim" {}
loadbalancer "lb1" { provider = group.cattle }
