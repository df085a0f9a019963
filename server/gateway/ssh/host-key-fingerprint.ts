// The SSH host key's fingerprint, kept in the clear beside the sealed key (it is public, and
// `edgeform admin ssh-host-key` shows it without the secret key).
export const SSH_FINGERPRINT_SETTING = 'ssh_host_key_fingerprint';
