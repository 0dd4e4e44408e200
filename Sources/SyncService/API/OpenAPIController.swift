import Hummingbird
import NIOCore

/// `GET /openapi.yaml`: the API's description, as built into the binary.
struct OpenAPIController: Sendable {
    func addRoutes(to router: Router<SubsyncRequestContext>) {
        router.get("openapi.yaml") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/yaml"],
                body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_yaml))
            )
        }
    }
}
