/// A configuration value that cannot be used, with the variable or flag it came from.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var variable: String
    public var message: String

    public init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }

    public var description: String { "\(variable) \(message)" }
}
