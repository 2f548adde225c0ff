// Package v1 is a typed client model of Clever Cloud's NodeGroup resource
// (nodegroups.api.clever-cloud.com/v1), which every CKE cluster serves and Clever Cloud's
// in-cluster operator reconciles into VMs.
//
// The platform owns this API, not us: the types model only the fields the provider reads or
// writes. Status is decoded loosely (unknown fields are ignored, every field is optional) and
// the provider never sends a full Update, only Create, Delete and merge patches, so fields the
// platform adds later survive our writes.
//
// +kubebuilder:object:generate=true
// +groupName=api.clever-cloud.com
package v1
