//! What a cgroup v2 path says about who runs there: a systemd unit, a container, a
//! Kubernetes pod. Recognized from the path's own components, the way systemd, Docker,
//! containerd, CRI-O and the kubelet name them; nothing is looked up.

/// The identities recognized in a cgroup path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupIdentity {
    /// The innermost systemd unit (`sshd.service`, `session-3.scope`), not slices.
    pub unit: Option<String>,
    /// A container id: 64 hex digits (Docker, containerd, CRI-O, Podman).
    pub container_id: Option<String>,
    /// A Kubernetes pod uid, with dashes (`…-pod<uid>.slice` with underscores under the
    /// systemd driver, `…/pod<uid>/` under the cgroupfs one).
    pub pod_uid: Option<String>,
}

pub fn identify(path: &str) -> CgroupIdentity {
    let mut id = CgroupIdentity::default();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if let Some(uid) = pod_uid(part) {
            id.pod_uid = Some(uid);
        }
        if let Some(c) = container_id(part) {
            id.container_id = Some(c);
            continue;
        }
        if part.ends_with(".service") || part.ends_with(".scope") {
            id.unit = Some(part.to_string());
        }
    }
    id
}

/// `docker-<64 hex>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`,
/// `libpod-<id>.scope`, or a bare `<64 hex>` component (`/docker/<id>`).
fn container_id(part: &str) -> Option<String> {
    let stem = part.strip_suffix(".scope").unwrap_or(part);
    let hex = stem.rsplit('-').next()?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hex.to_string())
}

/// `kubepods-burstable-pod<uid with _>.slice` or `pod<uid>`.
fn pod_uid(part: &str) -> Option<String> {
    let stem = part.strip_suffix(".slice").unwrap_or(part);
    let at = stem.rfind("pod")?;
    let uid = stem[at + 3..].replace('_', "-");
    let is_uid = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        });
    (is_uid && (at == 0 || stem[..at].ends_with('-'))).then_some(uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f1e5c3d2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a1908f7e6d5c4b3a291807";

    #[test]
    fn units_containers_and_pods_are_recognized() {
        assert_eq!(
            identify("/system.slice/sshd.service"),
            CgroupIdentity {
                unit: Some("sshd.service".into()),
                ..Default::default()
            }
        );
        assert_eq!(
            identify("/user.slice/user-0.slice/session-3.scope")
                .unit
                .as_deref(),
            Some("session-3.scope")
        );
        let docker = identify(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(docker.container_id.as_deref(), Some(ID));
        assert_eq!(
            docker.unit, None,
            "the container scope is the container, not a unit"
        );
        assert_eq!(
            identify(&format!("/docker/{ID}")).container_id.as_deref(),
            Some(ID)
        );
        let pod = identify(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_4e5f_6071_8293_a4b5c6d7e8f9.slice/cri-containerd-{ID}.scope"
        ));
        assert_eq!(
            pod.pod_uid.as_deref(),
            Some("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9")
        );
        assert_eq!(pod.container_id.as_deref(), Some(ID));
        let cgroupfs = identify(&format!(
            "/kubepods/besteffort/pod0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9/{ID}"
        ));
        assert_eq!(
            cgroupfs.pod_uid.as_deref(),
            Some("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9")
        );
        assert_eq!(identify("/"), CgroupIdentity::default());
        assert_eq!(identify("/init.scope").unit.as_deref(), Some("init.scope"));
        // Look-alikes are not identities.
        assert_eq!(identify("/system.slice/podman.service").pod_uid, None);
        assert_eq!(identify("/docker-abc.scope").container_id, None);
    }
}
