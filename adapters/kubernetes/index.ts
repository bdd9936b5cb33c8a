export { kubernetesKind } from './kubernetes-kind.js';
export { KubernetesAdapter, createKubernetesAdapter, type KubernetesAdapterDeps, type KubernetesAdapterStats } from './kubernetes-adapter.js';
export { DEFAULT_KUBERNETES_OPTIONS, parseKubernetesOptions, type KubernetesAdapterOptions, type NamespaceTarget } from './kubernetes-options.js';
export { NamespacePolicy } from './namespace-policy.js';
export {
  ANNOTATION_INSTANCES,
  ANNOTATION_METADATA,
  ANNOTATION_META_PREFIX,
  ANNOTATION_PORT,
  ANNOTATION_SERVICE_NAME,
  ANNOTATION_SYNC,
  ANNOTATION_WEIGHT,
  LABEL_MANAGED_BY,
  LABEL_SERVICE_NAME,
  LABEL_SLICE_MANAGED_BY,
  MANAGER,
  META,
  kubeServiceName,
} from './kube-names.js';
export { KubernetesRequestError, type KubernetesRequestErrorCode, type KubernetesRequestErrorInit } from './kubernetes-request-error.js';
export { KubernetesApplyError, type KubernetesWriteFailure } from './kubernetes-apply-error.js';
export { KubernetesRefusedError, type KubernetesRefusedReason } from './kubernetes-refused-error.js';
export { KubernetesConfigError } from './kubernetes-config-error.js';
