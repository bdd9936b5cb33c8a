/** The classic Nacos label-selector scenario as a CMDB file: providers 11/22, consumers 33/44/55. */
export const NACOS_SCENARIO_YAML = `
labels:
  site: [x11, x12, x13]
entities:
  ip:
    11.11.11.11: {site: x11}
    22.22.22.22: {site: x12}
    33.33.33.33: {site: x11}
    44.44.44.44: {site: x12}
    55.55.55.55: {site: x13}
`;
