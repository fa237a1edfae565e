// Package deploytest checks the deployment artefacts, which hold no Go of
// their own: the Helm chart in deploy/helm/betcode-relay (rendered with
// helm for several sets of values, validated with kubeconform and decoded
// strictly into the Kubernetes API types, then checked for what a rolling
// deploy without lost streams needs), docker-compose.yaml (the compose-spec
// schema, its build files, mounts and dependencies) and the Dockerfiles
// (static builds, non-root users, health checks).
//
// helm and kubeconform come from `make test-deps`; without them the tests
// fail under CI and are skipped elsewhere.
package deploytest
